"""platform/ is a source root, never a package: the standard `platform` module must win."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_standard_platform_module_is_not_shadowed():
    import platform

    import contrasweep

    assert platform.system()  # the standard library's function, not our folder
    assert hasattr(platform, "python_version")
    assert contrasweep.__version__


def test_platform_folder_has_no_init():
    assert not (ROOT / "platform" / "__init__.py").exists()


def test_torch_and_ray_import_beside_contrasweep():
    import ray  # noqa: F401  (both import the standard `platform` module)
    import torch

    import contrasweep.spec  # noqa: F401

    assert torch.tensor([1.0]).sum().item() == 1.0
