"""mnnjit.nn: MNN.nn - loading .mnn models as Modules, runtime managers."""
