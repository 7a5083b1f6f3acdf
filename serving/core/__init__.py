"""The model lifecycle: sources propose aspired versions, the manager loads and unloads them."""
