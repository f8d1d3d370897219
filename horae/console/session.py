"""The console's session: the API token in a cookie, and the CSRF token of its forms.

The session cookie holds the bearer token the user signed in with, ``HttpOnly`` (no script reads
it), ``SameSite=Strict`` (no other site's page sends it), ``Secure`` when the console is served
over TLS, ``Path=/console``. Nothing is kept on the server: every API process verifies the
cookie's token with the API's own :class:`~horae.api.auth.Verifier` and the same keys, so a
console behind several API workers needs no shared session store.

Every form carries a CSRF token in a hidden field, checked on POST before anything else runs:
the HMAC of the session's token under a key derived from the API's token keys
(``horae-console-csrf``), so it is per session, the same in every API process, and unknown to a
page of another origin. The login form, which has no session yet, is protected by a double
submit: a random value in a pre-session cookie that the hidden field must repeat.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from horae.api.auth import Principal, TokenError, Verifier

COOKIE = "horae_console"
LOGIN_COOKIE = "horae_console_login"
PATH = "/console"


def _service(request: Request) -> Any:
    return request.app.state.service


def _token_keys(request: Request) -> dict[str, str]:
    keys = _service(request).settings.api.token_keys
    return {kid: secret.get_secret_value() for kid, secret in keys.items()}


def verifier(request: Request) -> Verifier:
    """The API's token verifier over the API's keys, one per app."""
    held: Verifier | None = getattr(request.app.state, "console_verifier", None)
    if held is None:
        held = Verifier(_token_keys(request))
        request.app.state.console_verifier = held
    return held


def token_of(request: Request) -> str | None:
    return request.cookies.get(COOKIE) or None


def principal(request: Request) -> Principal | None:
    """Who the session's token names (``None``: no session, or a token the API refuses)."""
    token = token_of(request)
    if token is None:
        return None
    try:
        return verifier(request)(token)
    except TokenError:
        return None


def check_token(request: Request, token: str) -> Principal:
    """The token's principal, :class:`TokenError` saying why not."""
    return verifier(request)(token)


def _csrf_key(request: Request) -> bytes:
    keys = _token_keys(request)
    material = "\x00".join(f"{kid}={keys[kid]}" for kid in sorted(keys)).encode()
    return hmac.new(material, b"horae-console-csrf", hashlib.sha256).digest()


def csrf_token(request: Request) -> str:
    """The CSRF token of the session ('' without one)."""
    token = token_of(request)
    if token is None:
        return ""
    return hmac.new(_csrf_key(request), token.encode(), hashlib.sha256).hexdigest()


def csrf_ok(request: Request, sent: str | None) -> bool:
    expected = csrf_token(request)
    return bool(expected) and sent is not None and hmac.compare_digest(expected, sent)


def _flash_mac(request: Request, text: str) -> str:
    mac = hmac.new(_csrf_key(request), b"flash\x00" + text.encode(), hashlib.sha256)
    return mac.hexdigest()[:32]


def flash(request: Request, text: str) -> str:
    """The query string of a message for the next page (signed: a link cannot make one up)."""
    return urlencode({"done": text, "sig": _flash_mac(request, text)})


def flashed(request: Request) -> str:
    """The message of the query string, if this console signed it ('' otherwise)."""
    text, sig = request.query_params.get("done", ""), request.query_params.get("sig", "")
    ok = text and hmac.compare_digest(_flash_mac(request, text), sig)
    return text[:300] if ok else ""


def secure(request: Request) -> bool:
    return request.url.scheme == "https"


def set_session(response: Response, request: Request, token: str) -> None:
    response.set_cookie(
        COOKIE, token, path=PATH, httponly=True, secure=secure(request), samesite="strict"
    )
    response.delete_cookie(LOGIN_COOKIE, path=PATH, httponly=True, samesite="strict")


def clear_session(response: Response) -> None:
    response.delete_cookie(COOKIE, path=PATH, httponly=True, samesite="strict")


def login_nonce(request: Request) -> str:
    """The pre-session cookie's value (a new one when the browser has none)."""
    return request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(24)


def set_login_nonce(response: Response, request: Request, nonce: str) -> None:
    response.set_cookie(
        LOGIN_COOKIE,
        nonce,
        path=PATH,
        httponly=True,
        secure=secure(request),
        samesite="strict",
        max_age=3600,
    )


def login_nonce_ok(request: Request, sent: str | None) -> bool:
    held = request.cookies.get(LOGIN_COOKIE)
    return bool(held) and sent is not None and hmac.compare_digest(held or "", sent)
