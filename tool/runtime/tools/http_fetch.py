# Built-in tool: fetch a URL over HTTP(S), only where the sandbox's network
# policy allows it.
import urllib.error
import urllib.request

from execbox_tool import ToolError

SPEC = {
    "name": "http_fetch",
    "description": "Fetch an http or https URL and return the status, headers and body (text, "
                   "at most max_bytes). Refused with network_disabled unless the call's network "
                   "policy allows network access.",
    "parameters": {
        "type": "object",
        "properties": {
            "url": {"type": "string", "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://", "maxLength": 8192},
            "method": {"type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"], "default": "GET"},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 64},
            "body": {"type": "string", "maxLength": 1048576},
            "max_bytes": {"type": "integer", "minimum": 1, "maximum": 524288, "default": 262144},
            "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": 60, "default": 20},
        },
        "required": ["url"],
        "additionalProperties": False,
    },
}

MAX_BYTES = 524288


class NoRedirectToOtherSchemes(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if not newurl.lower().startswith(("http://", "https://")):
            raise ToolError("fetch_failed", "refusing a redirect to %r" % newurl[:256])
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def execute(args, ctx):
    if not ctx.network_allowed:
        raise ToolError("network_disabled", "network access is disabled for this call (network policy none)")
    url = args["url"]
    if not url.lower().startswith(("http://", "https://")):
        raise ToolError("args_invalid", "only http and https URLs are fetched")
    limit = min(int(args.get("max_bytes", 262144)), MAX_BYTES)
    body = args.get("body")
    req = urllib.request.Request(url, method=args.get("method", "GET"),
                                 data=body.encode("utf-8") if body is not None else None,
                                 headers=args.get("headers") or {})
    opener = urllib.request.build_opener(NoRedirectToOtherSchemes())
    try:
        resp = opener.open(req, timeout=float(args.get("timeout", 20)))
    except urllib.error.HTTPError as err:
        resp = err  # a status ≥ 400 is an answer, not a failure
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise ToolError("fetch_failed", "fetching %s: %s" % (url[:256], getattr(err, "reason", err))) from None
    with resp:
        data = resp.read(limit + 1) if resp.fp is not None else b""
        return {
            "url": resp.geturl(),
            "status": resp.status if hasattr(resp, "status") and resp.status else resp.code,
            "headers": dict(list(resp.headers.items())[:128]),
            "body": data[:limit].decode("utf-8", "replace"),
            "truncated": len(data) > limit,
        }
