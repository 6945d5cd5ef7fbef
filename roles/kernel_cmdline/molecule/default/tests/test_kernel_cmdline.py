"""Verify (testinfra): the drop-in appends iommu=pt to GRUB_CMDLINE_LINUX, GRUB's
configuration (the lab's update-grub, sourcing the files as grub-mkconfig does) boots with
it next, and the reboot it needs is recorded, not done."""

from gpuprov.lab import boot_loader

DROP_IN = "/etc/default/grub.d/99-gpuprov-kernel-cmdline.cfg"


def test_the_drop_in_appends_to_grub_cmdline_linux(host):
    text = host.file(DROP_IN).content_string
    assert 'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX:+$GRUB_CMDLINE_LINUX }iommu=pt"' in text
    # sourced after a GRUB_CMDLINE_LINUX of the site's, it keeps it
    kept = host.run(f'GRUB_CMDLINE_LINUX="console=ttyS0"; . {DROP_IN}; echo "$GRUB_CMDLINE_LINUX"')
    assert kept.stdout.strip() == "console=ttyS0 iommu=pt"


def test_the_next_boot_takes_the_argument_the_running_one_lacks(host):
    assert host.file(boot_loader.NEXT_CMDLINE).content_string.split()[-1] == "iommu=pt"
    assert "iommu=pt" not in host.file(boot_loader.PROC_CMDLINE).content_string


def test_the_reboot_is_recorded_not_done(host):
    assert host.file("/run/reboot-required").exists
    assert host.file("/run/reboot-required.pkgs").content_string.splitlines() == [
        "kernel command line: iommu=pt"]
