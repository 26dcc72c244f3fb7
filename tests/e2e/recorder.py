"""A logging callback for the e2e proxy: appends each success/failure's logging metadata to a file."""

from __future__ import annotations

import json
import os

from litellm.integrations.custom_logger import CustomLogger


class Recorder(CustomLogger):
    def _write(self, kwargs: dict) -> None:
        payload = kwargs.get("standard_logging_object") or {}
        record = {"metadata": payload.get("metadata", {}), "model_group": payload.get("model_group")}
        with open(os.environ["GUARD_E2E_LOG"], "a") as f:
            f.write(json.dumps(record, default=str) + "\n")

    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
        self._write(kwargs)

    async def async_log_failure_event(self, kwargs, response_obj, start_time, end_time):
        self._write(kwargs)


recorder = Recorder()
