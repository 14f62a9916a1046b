"""The log knowledge base, tested like semgrep rules: every entry against its own examples."""

from pathlib import Path

import pytest

from handlers import logpatterns
from handlers.knowledge import logs
from handlers.knowledge.logs import LogPatternError, load_file, use_user_file

BUILTIN = logs.builtin()


@pytest.mark.parametrize("entry", BUILTIN.entries, ids=lambda e: e.id)
def test_every_example_matches_its_entry_and_proves_only_its_codes(entry: logs.Entry) -> None:
    assert entry.examples, f"{entry.id} has no example line"
    assert entry.source.startswith("https://")
    for line, codes in entry.examples:
        assert entry.pattern.search(line), line
        assert BUILTIN.codes_of(line) == codes, line


def test_ids_are_unique_and_every_code_is_known() -> None:
    ids = [e.id for e in BUILTIN.entries]
    assert len(ids) == len(set(ids))
    assert BUILTIN.codes <= set(logs.CODES)


def test_envelope_gives_the_nested_cause_first() -> None:
    # kubernetes/kubernetes#97131
    line = ("Message:        Pod Allocate failed due to device plugin GetPreferredAllocation rpc "
            "failed with err: rpc error: code = Unknown desc = Unable to retrieve list of "
            "available devices: error creating nvml.Device 5: nvml: GPU is lost, which is "
            "unexpected")
    assert logpatterns.classify_log(line) == [("GPU_UNHEALTHY", line),
                                              ("DEVICE_ADMISSION_FAILED", line)]
    assert logpatterns.classify_line(line) == "GPU_UNHEALTHY"


def test_benign_lines_never_prove_a_failure() -> None:
    text = (
        "I0503 14:49:52.119211       1 factory.go:107] Detected non-NVML platform: could not "
        "load NVML library: libnvidia-ml.so.1: cannot open shared object file: No such file\n"
        "I0918 07:33:45.216871       1 health.go:151] Skipping non-nvmlEventTypeXidCriticalError"
        " event: {EventType:2}\n"
        "I0612 09:18:02.311093       1 main.go:381] No devices found. Waiting indefinitely.\n"
    )
    assert logpatterns.classify_log(text) == []


def test_case_changed_upstream_still_matches() -> None:
    # v0.9 logged "Failed to initialize NVML"; v0.14+ wraps it as "failed to initialize NVML".
    assert logpatterns.codes_of_line("Failed to initialize NVML: Unknown Error") == (
        "NVML_INIT_FAILED",)
    assert logpatterns.codes_of_line("error: failed to initialize NVML: Unknown Error") == (
        "NVML_INIT_FAILED",)


def test_hook_lines_name_the_cause_they_prove() -> None:
    assert logpatterns.codes_of_line(
        "stderr: nvidia-container-cli.real: initialization error: load library failed: "
        "libnvidia-ml.so.1: cannot open shared object file: no such file or directory: unknown"
    ) == ("DRIVER_NOT_READY",)
    assert logpatterns.codes_of_line(
        "stderr: nvidia-container-cli: ldcache error: open failed: /sbin/ldconfig.real: no such "
        "file or directory: unknown.") == ("CONTAINER_RUNTIME_NOT_CONFIGURED",)


def _write(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "patterns.yaml"
    p.write_text(body, encoding="utf-8")
    return p


def test_user_file_adds_entries_in_front(tmp_path: Path) -> None:
    path = _write(tmp_path, """
- id: site-driver-canary
  codes: [DRIVER_NOT_READY]
  pattern: 'gpu-canary: driver probe failed'
  component: our canary
  meaning: our own driver probe failed
  source: https://wiki.example.com/gpu-canary
  examples: ['gpu-canary: driver probe failed on node x']
""")
    try:
        cat = use_user_file(path)
        assert cat.entries[0].id == "site-driver-canary"
        assert logpatterns.classify_log("gpu-canary: driver probe failed on node x") == [
            ("DRIVER_NOT_READY", "gpu-canary: driver probe failed on node x")]
        # The built-in entries still apply.
        assert logpatterns.classify_line("Failed to initialize NVML: Unknown Error") == (
            "NVML_INIT_FAILED")
    finally:
        use_user_file(None)
    assert logpatterns.classify_log("gpu-canary: driver probe failed on node x") == []


@pytest.mark.parametrize("body,message", [
    ("- {id: a, codes: [NOT_A_CODE], pattern: x, component: c, meaning: m, source: s}",
     r"entry 0 \(a\): unknown finding code\(s\) NOT_A_CODE"),
    ("- {id: b, codes: [DRIVER_NOT_READY], pattern: '(', component: c, meaning: m, source: s}",
     r"entry 0 \(b\): bad pattern"),
    ("- {id: c, pattern: x, component: c, meaning: m, source: s}",
     r"entry 0 \(c\): give 'codes', or 'benign: true'"),
    ("- {id: d, codes: [DRIVER_NOT_READY], pattern: x, component: c, meaning: m, source: s,"
     " colour: red}", r"entry 0 \(d\): unknown key\(s\) colour"),
    ("- {codes: [DRIVER_NOT_READY], pattern: x}", r"entry 0: 'id' must be"),
    ("just: a mapping", r"expected a list of entries"),
    ("- {id: e, codes: [DRIVER_NOT_READY], pattern: 'driver gone', component: c, meaning: m,"
     " source: s, examples: ['driver went away']}",
     r"entry 0 \(e\): example 0 does not match the pattern"),
])
def test_bad_user_file_names_the_entry(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(LogPatternError, match=message):
        load_file(_write(tmp_path, body))
    with pytest.raises(LogPatternError):
        use_user_file(tmp_path / "patterns.yaml")
    assert logs.active() is logs.builtin()


def test_missing_user_file(tmp_path: Path) -> None:
    with pytest.raises(LogPatternError, match="cannot read"):
        use_user_file(tmp_path / "nope.yaml")
