"""Built-in recipes: data files shipped inside retfwheel (read with importlib.resources, never imported)."""
