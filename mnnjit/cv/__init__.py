"""mnnjit.cv: MNN.cv - OpenCV-style image functions on HWC uint8 BGR Vars (NHWC data format)."""
