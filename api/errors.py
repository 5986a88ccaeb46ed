"""Every API error is JSON with a reason; never an HTML page, never a 500 for bad input."""

import json

from django.core.exceptions import PermissionDenied, RequestDataTooBig, ValidationError
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import exception_handler

from core.states import IllegalTransition
from runs.actions.spending import SpendPending

MAX_BODY = 256 * 1024


class BoundedJSONParser(JSONParser):
    """Refuse oversized bodies before reading them."""

    def parse(self, stream, media_type=None, parser_context=None):
        request = (parser_context or {}).get("request")
        length = int(request.META.get("CONTENT_LENGTH") or 0) if request is not None else 0
        if length > MAX_BODY:
            raise PayloadTooLarge()
        data = super().parse(stream, media_type, parser_context)
        try:  # JSON admits a lone surrogate ("\\ud800"), which no database, page or box can take
            json.dumps(data, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise exceptions.ParseError("The body holds a lone surrogate (\\ud800-\\udfff): not text.") from None
        return data


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = f"The body is larger than {MAX_BODY} bytes."
    default_code = "too_large"


def handle(exc, context):
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge()
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or None)
    elif isinstance(exc, IllegalTransition):
        return Response({"error": "conflict", "detail": exc.messages}, status=409)
    elif isinstance(exc, SpendPending):  # not an error of the request: the run waits for an approver
        detail = exc.messages
        return Response({"error": "needs_approval", "detail": detail, "spend_request": exc.request.pk}, status=409)
    elif isinstance(exc, ValidationError):  # field errors stay under their fields, as a serializer's do
        detail = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        return Response({"error": "invalid", "detail": detail}, status=400)
    elif isinstance(exc, PermissionDenied):
        return Response({"error": "forbidden", "detail": str(exc)}, status=403)
    response = exception_handler(exc, context)
    if response is not None:
        detail = response.data.get("detail", response.data) if isinstance(response.data, dict) else response.data
        code = getattr(exc, "default_code", "error")
        code = "forbidden" if code == "permission_denied" else code  # one word for a 403, whoever refused
        response.data = {"error": code, "detail": detail}
    return response


@csrf_exempt  # nothing is changed here: an unrouted POST is a JSON 404, not Django's CSRF page
def not_found(request, *args, **kwargs):
    return JsonResponse({"error": "not_found", "detail": f"No API endpoint {request.path}"}, status=404)
