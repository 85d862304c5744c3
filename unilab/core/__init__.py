"""The bottom layer: math, random numbers and the data types every layer above shares. Imports only torch."""
