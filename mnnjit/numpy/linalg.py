"""mnnjit.numpy.linalg: MNN.numpy.linalg."""
