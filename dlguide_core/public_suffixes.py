"""Public suffixes: the names under which anyone may register a domain (`com`, `co.uk`, `github.io`), so that a
wildcard on one (`*.co.uk` in DLGUIDE_ALLOWED_HOSTS) allows every stranger's domain.

Read from the Public Suffix List where the system has it (Debian's `publicsuffix` package:
/usr/share/publicsuffix/public_suffix_list.dat; DLGUIDE_PUBLIC_SUFFIX_LIST names another copy), never from the
network; else from the short list below: every single-label name (a TLD), and the multi-label suffixes people
actually meet. The list is a floor, not the whole PSL: a suffix missing from it is still refused wherever the
system's list is installed.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

LIST_ENV = "DLGUIDE_PUBLIC_SUFFIX_LIST"
SYSTEM_LIST = Path("/usr/share/publicsuffix/public_suffix_list.dat")

# Second-level suffixes under country codes (ICANN section of the PSL), and the hosting suffixes (its private
# section) where a wildcard would be someone else's site.
_BUILT_IN = """
ac.uk co.uk gov.uk ltd.uk me.uk net.uk nhs.uk org.uk plc.uk police.uk sch.uk
asn.au com.au edu.au gov.au id.au net.au org.au
ac.nz co.nz geek.nz gen.nz govt.nz net.nz org.nz school.nz
ac.jp ad.jp co.jp ed.jp go.jp gr.jp lg.jp ne.jp or.jp
ac.kr co.kr go.kr ne.kr or.kr re.kr
com.br edu.br gov.br net.br org.br
ac.cn com.cn edu.cn gov.cn net.cn org.cn
com.mx edu.mx gob.mx net.mx org.mx
ac.in co.in edu.in firm.in gen.in gov.in ind.in net.in org.in res.in
ac.za co.za gov.za net.za org.za web.za
com.ar com.co com.tr com.ua com.pl net.pl org.pl com.es nom.es org.es com.pt com.gr com.cy
com.tw edu.tw idv.tw net.tw org.tw com.hk edu.hk gov.hk net.hk org.hk
com.sg edu.sg gov.sg net.sg org.sg com.my edu.my gov.my net.my org.my
ac.id co.id go.id or.id web.id com.ph com.pk com.ng com.eg com.sa com.vn
ac.th co.th go.th in.th or.th ac.il co.il gov.il org.il ac.at co.at gv.at or.at
co.ke co.tz co.ug com.pe com.ve com.ec com.uy com.bo com.py com.do com.gt
com.ru net.ru org.ru com.de com.fr
github.io gitlab.io githubusercontent.com herokuapp.com blogspot.com appspot.com firebaseapp.com web.app
azurewebsites.net cloudapp.net cloudfront.net amazonaws.com s3.amazonaws.com elasticbeanstalk.com
netlify.app vercel.app pages.dev workers.dev fly.dev onrender.com ngrok.io ngrok-free.app ngrok.app
trycloudflare.com duckdns.org dyndns.org no-ip.org ddns.net myftp.org
"""
BUILT_IN = frozenset(_BUILT_IN.split())


@lru_cache(maxsize=4)
def _rules(path: Path | None) -> frozenset[str]:
    """The PSL's rules at `path` (`co.uk`, `*.ck`, `!www.ck`), lower case; empty when it cannot be read."""
    if path is None:
        return frozenset()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return frozenset()
    return frozenset(line.split()[0].lower() for line in text.splitlines()
                     if line.strip() and not line.lstrip().startswith("//"))


def _list_path() -> Path | None:
    named = os.environ.get(LIST_ENV, "").strip()
    if named:
        return Path(named)
    return SYSTEM_LIST if SYSTEM_LIST.is_file() else None


def is_public_suffix(domain: str) -> bool:
    """Whether anyone may register names directly under `domain` (lower case, no trailing dot)."""
    domain = domain.strip(".").lower()
    if not domain or "." not in domain or domain in BUILT_IN:
        return True  # a single label is a top-level domain (or will be one)
    rules = _rules(_list_path())
    if domain in rules:
        return True
    parent = domain.partition(".")[2]
    return f"*.{parent}" in rules and f"!{domain}" not in rules
