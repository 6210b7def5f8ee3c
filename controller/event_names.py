"""The controller's events, by the names both shells (node/shells/controller_events.py, sim/controller.py),
controller/redo.py and the ``controller_error`` log line use; its own module so that controller/handlers.py
(which names one) and controller/redo.py (which runs the handlers) import no circle."""
from __future__ import annotations

STARTUP = "startup"
CONTROLLER_CHANGE = "controller_change"
BROKER_CHANGE = "broker_change"
TOPIC_CHANGE = "topic_change"
TOPIC_DELETION = "topic_deletion"
PARTITION_MODIFICATIONS = "partition_modifications"   # a topic znode changed (partitions added)
CONFIG_CHANGE = "config_change"                       # a topic's or this broker's config changed
REASSIGNMENT_ISR_CHANGE = "reassignment_isr_change"   # an ISR grew: reassignments may complete
ZK_PARTITION_REASSIGNMENT = "zk_partition_reassignment"   # /admin/reassign_partitions appeared
LOG_DIR_EVENT = "log_dir_event"                       # /log_dir_event_notification changed (controller/log_dirs.py)
EXPIRE = "expire"
REGISTER_AND_REELECT = "register_and_reelect"
TICK = "tick"
SHUTDOWN = "shutdown"
