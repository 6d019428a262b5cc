import sys

from psyattrs.cli import main

sys.exit(main())
