"""The ids the bot's buttons, forms and shortcut carry, and its listeners match."""

from __future__ import annotations

ACTION_APPROVE = "review_approve"


ACTION_REJECT = "review_reject"


ACTION_ANOTHER_ROUND = "review_another_round"


ACTION_FEEDBACK = "verdict_feedback"


ACTION_DEBATE_ANYWAY = "debate_anyway"


ACTION_ADOPT_WEIGHTS = "adopt_confidence_weights"


ACTION_STOP = "debate_stop"


VIEW_DEBATE = "debate_modal"


VIEW_CONFIG = "config_modal"


VIEW_REVIEW_NOTE = "review_note_modal"


SHORTCUT_DEBATE_THREAD = "debate_this_thread"
