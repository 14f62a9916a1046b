"""The node-condition knowledge (handlers/knowledge/node_conditions.yaml): each entry matches
its examples and not the healthy conditions beside them, and the stage reads it."""

from __future__ import annotations

import pytest

from handlers.knowledge.node_conditions import entries, matches


def test_every_entry_loads_with_its_examples_checked() -> None:
    got = entries()
    assert {e.code for e in got} == {"GPU_MISSING", "GPU_NVLINK_DOWN", "GPU_HEALTH_CHECK_FAILED"}
    assert all(e.source.startswith("https://") for e in got)


@pytest.mark.parametrize(("cond", "codes"), [
    ({"type": "GPUMissing", "status": "True", "reason": "GPUMissing",
      "message": "Expected to see 8 GPUs but found 7. FaultCode: NHC2009"}, ["GPU_MISSING"]),
    # AKS writes Unknown with the healthy reason: status decides, never the reason alone.
    ({"type": "GPUMissing", "status": "Unknown", "reason": "NoGPUMissing",
      "message": "Timeout when running plugin"}, []),
    ({"type": "NVLinkStatusInactive", "status": "True", "reason": "NVLinkStatusInactive",
      "message": "NVLink issues detected"}, ["GPU_NVLINK_DOWN"]),
    # EKS keeps the newest issue as the reason and every issue's message.
    ({"type": "AcceleratedHardwareReady", "status": "False",
      "reason": "NvidiaDeviceCountMismatch",
      "message": "detected 2 Nvidia Double Bit error(s) on location [3]; expected 8 GPUs for "
                 "this instance type but only 7 were detected"},
     ["GPU_MISSING", "GPU_HEALTH_CHECK_FAILED"]),
    ({"type": "AcceleratedHardwareReady", "status": "False", "reason": "DCGMError",
      "message": "failed to initialize DCGM"}, []),
    ({"type": "AcceleratedHardwareReady", "status": "True", "reason": "NvidiaGPUIsReady",
      "message": "Monitoring for the Nvidia GPU system is active"}, []),
])
def test_conditions_prove_their_codes(cond: dict[str, str], codes: list[str]) -> None:
    assert sorted(h.entry.code for h in matches([cond])) == sorted(codes)


def test_gpu_counts_come_from_the_message() -> None:
    hit = matches([{"type": "GPUMissing", "status": "True", "reason": "GPUMissing",
                    "message": "Expected to see 8 GPUs but found 0. FaultCode: NHC2009"}])[0]
    assert hit.entry.gpu_counts(hit.condition) == (8, 0)
