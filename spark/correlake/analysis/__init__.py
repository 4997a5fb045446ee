"""What analysts ask of a lake (`correlake sql`, `report`, `explain`), as functions of a
SparkSession that a warm driver serves (`driver/calls.py`): the commands print what
they return."""
