"""Tables, figures and the results index built from attack scores."""
