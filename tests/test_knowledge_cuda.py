import pytest

from handlers.knowledge import cuda


@pytest.mark.parametrize("container,want", [
    ({"image": "nvidia/cuda:12.4.1-runtime-ubuntu22.04"}, "12.4"),
    ({"image": "docker.io/pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"}, "12.1"),
    ({"image": "vllm/vllm-openai:v0.4.0-cu118"}, "11.8"),
    ({"image": "python:3.11", "env": [{"name": "CUDA_VERSION", "value": "11.7.1"}]}, "11.7.1"),
    ({"image": "x:1", "env": [{"name": "NVIDIA_REQUIRE_CUDA",
                               "value": "cuda>=12.2 brand=tesla,driver>=470,driver<471"}]},
     "12.2"),
])
def test_image_cuda(container: dict[str, object], want: str) -> None:
    got = cuda.image_cuda(container)
    assert got is not None and got[0] == want


def test_unversioned_images_name_no_cuda() -> None:
    assert cuda.image_cuda({"image": "nvcr.io/nvidia/pytorch:24.05-py3"}) is None
    assert cuda.image_cuda({"image": "redis:7.2"}) is None


def test_driver_requirements_come_from_the_table() -> None:
    assert cuda.toolkit_driver("12.4") == "550.54.14"
    assert cuda.toolkit_driver("12.7") == "560.28.03"  # no 12.7 release: nearest earlier
    assert cuda.min_driver("12.4") == "525.60.13"  # minor version compatibility
    assert cuda.min_driver("10.2") == "440.33"
    assert cuda.driver_cuda("470.223.02") == "11.4"
    assert cuda.driver_cuda("550.54.15") == "12.4"
    assert "550.54.14" in cuda.requirement_text("12.4")


@pytest.mark.parametrize("image,driver,node_cuda,verdict", [
    ("12.4", "470.223.02", None, "too-old"),
    ("12.4", "535.104.05", None, "new-enough"),  # 12.x runs on >= 525.60.13
    ("11.8", "450.80.02", None, "new-enough"),
    ("12.1", None, "12.2", "new-enough"),
    ("12.1", None, "11.4", "too-old"),
    ("10.2", None, "10.1", "too-old"),
    ("12.1", None, None, "unknown"),
])
def test_driver_verdict(image: str, driver: str | None, node_cuda: str | None,
                        verdict: str) -> None:
    assert cuda.driver_verdict(image, driver, node_cuda) == verdict


def test_driver_from_driver_image() -> None:
    assert cuda.driver_from_image("nvcr.io/nvidia/driver:550.54.15-ubuntu22.04") == "550.54.15"
    assert cuda.driver_from_image("nvcr.io/nvidia/driver:535.104.05-rhel9.4") == "535.104.05"
    assert cuda.driver_from_image("nvcr.io/nvidia/k8s-device-plugin:v0.15.0") is None
