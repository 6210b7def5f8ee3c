import sys

from node.boot import broker_main

sys.exit(broker_main())
