import pytest

from handlers.knowledge import xid

REQUIRED = (13, 31, 32, 38, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 119, 120)


@pytest.mark.parametrize("code", REQUIRED)
def test_required_xids_are_described(code: int) -> None:
    info = xid.xid_info(code)
    assert info is not None
    assert info.xid == code
    assert info.action in xid.ACTIONS
    assert info.source.startswith("https://docs.nvidia.com/deploy/")


def test_hardware_xids() -> None:
    hardware = {c for c in REQUIRED if (i := xid.xid_info(c)) and i.hardware}
    assert {48, 63, 64, 74, 79, 92, 94, 95} <= hardware
    assert not {13, 31, 43, 45, 68, 69} & hardware
    fell_off = xid.xid_info(79)
    assert fell_off is not None and fell_off.action == "drain"
    app = xid.xid_info(13)
    assert app is not None and app.action == "app-fix"


def test_unknown_xid() -> None:
    assert xid.xid_info(100000) is None


def test_xids_in_kernel_lines() -> None:
    text = (
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
        "NVRM: Xid (0000:03:00): 13, 0008 00000000 0000a097\n"
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=2, GPU has fallen off the bus.\n"
        "kernel: something else 48\n"
    )
    assert xid.xids_in(text) == [79, 13]


def test_bad_entry_is_named() -> None:
    with pytest.raises(ValueError, match=r"entry 3 \(Xid 9\): action"):
        xid._parse({"xid": 9, "name": "n", "meaning": "m", "action": "reboot",
                    "hardware": False, "source": "s"}, "xid.yaml entry 3")
