"""What pyproject.toml cannot say: the Ansible collection, which a checkout keeps at the
repository's top (galaxy.yml, roles/, playbooks/, plugins/, meta/), goes into the wheel as
gpuprov/ansible_collections/gpuprov/gpu, where gpuprov/collection.py finds it installed.
Everything else about the package is in pyproject.toml."""

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

COLLECTION = "gpuprov.ansible_collections.gpuprov.gpu"


class BuildPy(build_py):
    """The collection's directory is the repository's top: none of the Python files there
    (this one) is part of it; its plugins go as data, as Ansible loads them."""

    def find_package_modules(self, package, package_dir):
        return [] if package == COLLECTION else super().find_package_modules(package, package_dir)


setup(
    packages=[*find_packages(include=["gpuprov", "gpuprov.*"]), COLLECTION],
    package_dir={COLLECTION: "."},
    include_package_data=False,
    package_data={
        "gpuprov": ["data/**/*"],
        COLLECTION: ["galaxy.yml", "README.md", "CHANGELOG.md", "meta/*", "playbooks/*",
                     "plugins/**/*", "roles/**/*"],
    },
    exclude_package_data={COLLECTION: ["roles/*/molecule/**/*", "**/__pycache__/*"]},
    cmdclass={"build_py": BuildPy},
)
