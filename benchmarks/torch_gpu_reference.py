#!/usr/bin/env python3
"""PyTorch (CUDA, eager, fp32, batch 1) latency of torchvision's MobileNetV2 and ResNet-18 at 224x224,
as a same-GPU reference point for mnnjit's OpenCL numbers."""
import json, os, time
import torch, torchvision
res = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__}
x = torch.randn(1, 3, 224, 224, device="cuda")
for name, ctor in (("mobilenetv2", torchvision.models.mobilenet_v2), ("resnet18", torchvision.models.resnet18)):
    m = ctor().eval().cuda()
    with torch.inference_mode():
        for _ in range(20):
            m(x)
        torch.cuda.synchronize()
        ts = []
        for _ in range(100):
            t = time.perf_counter(); m(x); torch.cuda.synchronize(); ts.append(time.perf_counter() - t)
    ts.sort()
    res[name + "_eager_ms"] = 1000 * ts[len(ts) // 2]
print(json.dumps(res))
open(os.path.join(os.environ.get("OUT", "."), "torch_ref.json"), "w").write(json.dumps(res))
