import subprocess
import sys


def test_torchvision_and_laplace_import_on_this_torch_build():
    # a fresh interpreter, so the shim runs before anything else imported torchvision
    code = (
        "from miarepro.compat import ensure_torchvision; ensure_torchvision(); "
        "import torchvision, laplace, torch; "
        "model = torchvision.models.resnet18(num_classes=3).eval(); "
        "print(model(torch.zeros(1, 3, 32, 32)).shape)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "torch.Size([1, 3])" in result.stdout
