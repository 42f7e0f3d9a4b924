"""mnnjit.nn: MNN.nn - loading .mnn models as modules, user module base class, layer factories,
runtime managers."""
from .layers import EmptyModule, batch_norm, conv, dropout, dummy, linear
from .module import Module, _Module, load_module, load_module_from_file
from .runtime_manager import RuntimeManager, create_runtime_manager

__all__ = ["Module", "_Module", "load_module", "load_module_from_file", "RuntimeManager",
           "create_runtime_manager", "conv", "linear", "batch_norm", "dropout", "EmptyModule", "dummy"]
