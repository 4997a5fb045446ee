"""The stages as DataFrame -> DataFrame functions: bronze, silver, key groups, scope, gold."""
