"""mnnjit.numpy.random: MNN.numpy.random."""
