"""The lab's gdrdrv init script fails as the real one does (NVIDIA/gdrcopy
packages/dkms/debian/gdrdrv.init with Debian's lsb-base): each failing step is printed and
the next one runs, the script exits 0, and without the module no device node is made. Run
here with bash, its lab tools swapped for stand-ins of this test's own."""

from __future__ import annotations

import subprocess

import pytest

from gpuprov.lab import gdrcopy, kernel_view


def _start(tmp_path, loaded: list[str], modprobe_ok: bool):
    lsmod = tmp_path / "lsmod"
    lsmod.write_text("#!/bin/sh\necho 'Module Size Used by'\n"
                     + "".join(f"echo '{m} 16384 0'\n" for m in loaded))
    modprobe = tmp_path / "modprobe"
    modprobe.write_text("#!/bin/sh\n" + ("exit 0\n" if modprobe_ok else
                                         "echo \"modprobe: ERROR: could not insert 'gdrdrv'\" "
                                         ">&2; exit 1\n"))
    for tool in (lsmod, modprobe):
        tool.chmod(0o755)
    device = tmp_path / "gdrdrv"
    script = (gdrcopy._INIT_SCRIPT.replace(kernel_view.LSMOD, str(lsmod))
              .replace(kernel_view.MODPROBE, str(modprobe)).replace(gdrcopy.DEVICE, str(device)))
    result = subprocess.run(["bash", "-c", script, "gdrdrv", "start"], capture_output=True,
                            text=True, timeout=30, check=False)
    return result, device.exists()


@pytest.mark.parametrize("loaded, modprobe_ok, said", [
    ([], False, "module nvidia is not loaded"),
    (["nvidia"], False, "Loading gdrdrv kernel module:  failed!"),
])
def test_a_failing_start_is_printed_and_exits_0_without_a_device(tmp_path, loaded, modprobe_ok,
                                                                  said):
    result, device = _start(tmp_path, loaded, modprobe_ok)
    assert result.returncode == 0, result.stderr
    assert said in result.stdout
    assert not device


def test_with_the_module_loaded_the_device_is_made(tmp_path):
    result, device = _start(tmp_path, ["nvidia", "gdrdrv"], True)
    assert (result.returncode, device) == (0, True)
    assert "module already loaded" in result.stdout and "failed" not in result.stdout
