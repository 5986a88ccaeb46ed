"""Log filters: an expected refusal is one line, not a traceback.

Django logs every PermissionDenied (and a 404 raised in a view) under `django.request` with the
exception attached, so each expected 403 wrote a full traceback to the log: noise that buries the
tracebacks that matter. A 4xx record keeps its line (who was refused what) without the stack."""

import logging


class RefusalsWithoutTraceback(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if 400 <= getattr(record, "status_code", 0) < 500:
            record.exc_info, record.exc_text = None, None
        return True
