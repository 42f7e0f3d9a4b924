"""mnnjit.nn: MNN.nn - loading .mnn models as Modules, runtime managers."""
from .module import Module, load_module, load_module_from_file
from .runtime_manager import RuntimeManager, create_runtime_manager

_Module = Module

__all__ = ["Module", "_Module", "load_module", "load_module_from_file", "RuntimeManager",
           "create_runtime_manager"]
