"""gpuprov: provision and validate GPU servers with Ansible."""

from gpuprov.collection import VERSION as __version__

__all__ = ["__version__"]
