"""What a model is told when search hands it no tool: that nothing here does the job, so it says so to the user
rather than reach for the closest tool (issue 49). Every way in tells it the same."""

# The answer to a model's own tool search (find_tools, a provider's tool search) that found nothing.
NO_TOOL_AVAILABLE = "no tool available for this; say so to the user"
# A note beside a request that was offered no tool: it may be small talk, which needs none.
NO_TOOL_OFFERED = "No tool is available for this request. If it needs one, say so to the user rather than guess."
