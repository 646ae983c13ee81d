import sys

from .commands.launch import main

sys.exit(main())
