import sys

from specgen.server.cli import main

sys.exit(main())
