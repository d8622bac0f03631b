"""toolrag inside the agent frameworks people use. Each module needs its framework (an extra of its own):

- `toolrag.integrations.langchain`: tools that execute through the gateway, and a retriever of tools (`langchain`).
- `toolrag.integrations.langgraph`: a graph that selects tools per turn for the principal (`langgraph`).
- `toolrag.integrations.openai_agents`: tools per run for the OpenAI Agents SDK (`openai-agents`).
- `toolrag.integrations.pydantic_ai`: a toolset that selects per run step (`pydantic-ai`).
- `toolrag.integrations.llamaindex`: an object retriever of tools for LlamaIndex agents (`llamaindex`).

Every call made through any of them passes toolrag's execution gateway (`toolrag.runtime.toolbox.Toolbox`): the
principal's permissions re-checked, arguments validated, a timeout, the usage log.
"""
