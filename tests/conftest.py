import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, settings  # noqa: E402

# CI runs a share of every property: 250 examples each (the same ones every run: derandomized),
# and 1,000 for the last-message property of issue 25. The whole run is HYPOTHESIS_PROFILE=full
# (1,000 each) or deep (10,000): see "Tests" in docs/contributing.md.
common = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large], derandomize=True)
settings.register_profile("ci", max_examples=250, **common)
settings.register_profile("full", max_examples=1000, **common)
settings.register_profile("deep", max_examples=10000, **common)
settings.register_profile("dev", max_examples=100, **common)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
