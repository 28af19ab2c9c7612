"""The words of generated scenes: colours, materials, poses, sizes, relations and their inverses.

Shared by the scene generator and the question generator (one place, no import cycle).
"""

COLOURS = ("white", "black", "red", "blue", "green", "yellow", "brown", "gray", "orange", "pink")
MATERIALS = ("wooden", "metal", "plastic", "glass", "ceramic", "leather", "fabric", "stone", "paper", "wax")
POSES = ("standing", "sitting")
SIZES = ("small", "large")
RELATIONS = ("on", "under", "in front of", "behind", "above", "below", "next to",
             "to the left of", "to the right of")
INVERSE = {"on": "under", "under": "on", "in front of": "behind", "behind": "in front of",
           "above": "below", "below": "above", "next to": "next to",
           "to the left of": "to the right of", "to the right of": "to the left of"}
