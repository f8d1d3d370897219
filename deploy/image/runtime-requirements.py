"""Print the runtime dependencies of pyproject.toml, one a line (the image installs them under
requirements.lock's exact versions before it copies the source, so that layer is rebuilt only
when the dependencies or the lock change)."""

import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["dependencies"]))
