"""dptwin_profile: measure a PyTorch model on one device and write it as a dptwin
model file (the library schema of scenarios/models/*.yaml, with measured costs).

    import dptwin_profile
    prof = dptwin_profile.profile(model, (inputs, targets), loss_fn, optimizer)
    prof.write("my.yaml")            # dptwin predict --model my.yaml ...

or from the command line, with PYTHONPATH set to this package's parent:

    python3 -m dptwin_profile my_model:build --batch 32 --device cpu -o my.yaml

where my_model.build() returns (model, (inputs, targets), loss_fn).
"""
try:
    import torch  # noqa: F401
except ImportError as e:  # the python3 first on PATH may lack torch (Debian's is /usr/bin/python3)
    raise ImportError(f"dptwin_profile needs PyTorch in this Python ({e}); run it with the Python your model "
                      "uses") from e

from .errors import ProfileError  # noqa: E402
from .profiler import Profile, profile  # noqa: E402

__all__ = ["ProfileError", "Profile", "profile"]
