import sys

from contrasweep.cli import main

sys.exit(main())
