import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, settings  # noqa: E402

# CI runs every property with 1,000 examples; HYPOTHESIS_PROFILE=deep runs 10,000 locally.
common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], derandomize=True)
settings.register_profile("ci", max_examples=1000, **common)
settings.register_profile("deep", max_examples=10000, **common)
settings.register_profile("dev", max_examples=100, **common)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
