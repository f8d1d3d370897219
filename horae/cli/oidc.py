"""``horae oidc rotate|keys``: the signing keys of the identity tokens (operators;
``HORAE_OIDC_KEYS_DIR``, docs/security.md, "Outbound identity").

``rotate`` adds a key that is published at once and signs ``HORAE_OIDC_PUBLISH_LEAD_S`` later,
and drops the keys whose every token has expired; ``keys`` lists the set and what each key does
now (``publishing``: published, not signing yet; ``signing``; ``retiring``: published until its
tokens expired, signing no more)."""

from __future__ import annotations

import argparse
import sys
import time

from horae.cli.common import add_flags
from horae.outbound.oidc_files import OidcKeyFiles
from horae.settings import Settings

FLAGS = ("oidc_keys_dir", "oidc_publish_lead_s", "oidc_skew_s")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    oidc = subparsers.add_parser("oidc", help="identity-token signing keys (operators)")
    sub = oidc.add_subparsers(dest="oidc_command", metavar="ACTION", required=True)
    text = "add a signing key (published now, signing after the lead); drop retired keys"
    rotate = sub.add_parser("rotate", help=text, description=text)
    add_flags(rotate, None, FLAGS)
    rotate.set_defaults(func=run_rotate)
    text = "list the signing keys and what each does now"
    keys = sub.add_parser("keys", help=text, description=text)
    add_flags(keys, None, FLAGS)
    keys.set_defaults(func=run_keys)


def _store(settings: Settings, command: str) -> OidcKeyFiles | None:
    if settings.oidc_keys_dir is None:
        print(
            f"horae oidc {command}: HORAE_OIDC_KEYS_DIR (--oidc-keys-dir) is unset", file=sys.stderr
        )
        return None
    return OidcKeyFiles(settings.oidc_keys_dir)


def run_rotate(settings: Settings, args: argparse.Namespace) -> int:
    store = _store(settings, "rotate")
    if store is None:
        return 2
    if settings.oidc_publish_lead_s < 0:
        print("horae oidc rotate: the publish lead must not be negative", file=sys.stderr)
        return 2
    key = store.rotate(time.time(), settings.oidc_publish_lead_s, settings.oidc_skew_s)
    print(
        f"{key.kid} signs from {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(key.activates_at))}"
    )
    return 0


def run_keys(settings: Settings, args: argparse.Namespace) -> int:
    store = _store(settings, "keys")
    if store is None:
        return 2
    now = time.time()
    keys = store.key_set()
    signing = keys.signing(now)
    for key in keys.keys:
        retires = keys.retires_at(key, settings.oidc_skew_s)
        if key.activates_at > now:
            state = "publishing"
        elif signing is not None and key.kid == signing.kid:
            state = "signing"
        elif retires is not None and retires <= now:
            state = "retired"  # out of the JWKS; the next rotation deletes it
        else:
            state = "retiring"
        until = (
            "-" if retires is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(retires))
        )
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(key.activates_at))
        private = "private" if store.private_key(key.kid) is not None else "public only"
        print(f"{key.kid}\t{state}\tsigns from {since}\tpublished until {until}\t{private}")
    return 0
