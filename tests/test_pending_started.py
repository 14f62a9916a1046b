"""Which pods that are not Pending still need a diagnosis (handlers/pending/started.py)."""

from __future__ import annotations

from handlers.pending import started
from tests.pending_ctx import pod_context


def test_running_and_succeeded_pods_run_as_they_should() -> None:
    assert started.trouble(pod_context("pod-running", "ml-team", "train-0")) is None
    assert started.trouble(pod_context("pod-succeeded", "research", "mmlu-eval-t7c2k")) is None


def test_admission_rejections_are_trouble() -> None:
    ctx = pod_context("karpenter-pod-bound-before-plugin-outof-gpu", "default",
                      "triton-6b8c9d7f5-7kq2x")
    assert "OutOfnvidia.com/gpu" in (started.trouble(ctx) or "")
    ctx = pod_context("failed-admission-gpu-lost", "default", "rojin-2q6ld")
    assert "UnexpectedAdmissionError" in (started.trouble(ctx) or "")


def test_a_crash_looping_running_pod_is_trouble_and_its_message_is_read() -> None:
    ctx = pod_context("start-error-driver-library-mismatch", "ml", "finetune-0")
    assert "CrashLoopBackOff" in (started.trouble(ctx) or "")
    found = started.check(ctx)
    driver = [f for f in found if f.code == "DRIVER_NOT_READY"]
    assert driver and any("driver/library version mismatch" in e for e in driver[0].evidence)


def test_a_pod_without_a_gpu_request_owns_its_cuda_error() -> None:
    ctx = pod_context("cuda-error-no-gpu-request-crashloop", "default", "cuda-vector-add-11-6")
    assert started.trouble(ctx) is not None
    codes = {f.code for f in started.check(ctx)}
    assert "CUDA_DRIVER_MISMATCH" not in codes
    assert "DEVICE_PLUGIN_MISSING" not in codes  # the node's chain is not its problem
