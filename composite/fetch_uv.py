"""Composite variant: fetch the uv binary pinned in requirements/uv.txt for this platform, by URL and hash.

    python3 -I fetch_uv.py LOCK DEST_DIR      # writes DEST_DIR/bin/uv; exit 0, else 1 with the reason

The lock names one wheel per runner platform (``uv @ URL ; sys_platform == "…" and platform_machine == "…"``,
then ``--hash=sha256:…``). The wheel's bytes must have that digest before anything in it is read; only the
``uv`` executable is taken from it. This is what ``pip install --require-hashes --target`` of the same
lock does, without pip's start-up: pip spends about a second of CPU importing itself, which on a busy
runner was most of the step's budget (BENCHMARKS.md, "Composite set-up"). Standard library only: it runs
on the runner's interpreter before any venv exists.
"""

import hashlib
import io
import os
import platform
import re
import sys
import urllib.request
import zipfile

LINE = re.compile(r'^uv @ (?P<url>https?://\S+/(?P<wheel>uv-(?P<version>[0-9.]+)-py3-none-[A-Za-z0-9_.]+\.whl))'
                  r' ; sys_platform == "(?P<os>[a-z]+)" and platform_machine == "(?P<machine>[A-Za-z0-9_]+)" \\\n'
                  r'\s+--hash=sha256:(?P<sha256>[0-9a-f]{64})$', re.MULTILINE)
MAX_WHEEL_BYTES = 64 * 1024 * 1024  # uv's wheels are 15 to 20 MB


def main(lock: str, dest: str) -> int:
    with open(lock, encoding="utf-8") as handle:
        pins = [m for m in LINE.finditer(handle.read()) if (m["os"], m["machine"]) == (sys.platform, platform.machine())]
    if len(pins) != 1:
        print(f"{lock} pins no uv wheel for {sys.platform} {platform.machine()}", file=sys.stderr)
        return 1
    pin = pins[0]
    with urllib.request.urlopen(pin["url"], timeout=60) as response:  # noqa: S310 (the lock's URL; the bytes are checked by hash)
        data = response.read(MAX_WHEEL_BYTES + 1)
    digest = hashlib.sha256(data).hexdigest()
    if len(data) > MAX_WHEEL_BYTES or digest != pin["sha256"]:
        print(f"{pin['wheel']}: sha256 {digest}, the lock pins {pin['sha256']}", file=sys.stderr)
        return 1
    with zipfile.ZipFile(io.BytesIO(data)) as wheel:
        binary = wheel.read(f"uv-{pin['version']}.data/scripts/uv")
    os.makedirs(os.path.join(dest, "bin"), exist_ok=True)
    target = os.path.join(dest, "bin", "uv")
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
    with os.fdopen(fd, "wb") as out:
        out.write(binary)
    print(f"uv {pin['version']} from {pin['wheel']} (sha256 {digest[:16]}…, as pinned)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1], sys.argv[2]))
    except (OSError, KeyError, zipfile.BadZipFile) as error:
        print(f"uv could not be fetched: {error}", file=sys.stderr)
        sys.exit(1)
