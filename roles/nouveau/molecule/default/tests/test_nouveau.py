"""Verify (testinfra): the blacklist is in place and no reboot was invented."""


def test_blacklist_content(host):
    conf = host.file("/etc/modprobe.d/blacklist-nouveau.conf")
    assert conf.exists and conf.mode == 0o644 and conf.user == "root"
    assert "blacklist nouveau" in conf.content_string.splitlines()
    assert "options nouveau modeset=0" in conf.content_string.splitlines()


def test_no_initramfs_pretended_and_no_reboot_pending(host):
    # a lab node has no initramfs tooling and no nouveau loaded: nothing to reboot for
    assert not host.file("/usr/sbin/update-initramfs").exists
    assert not host.file("/sys/module/nouveau").exists
    assert not host.file("/run/reboot-required").exists
