"""A larger prompt corpus for specgen-train-draft, composed from topic and form lists (`--compose N`).

The shipped prompts.txt has a few dozen prompts: enough to test the trainer, too few for a head that
generalises. This module crosses ~100 everyday topics with a dozen text forms (an explanation, a story
opening, a question, a list, ...) and 40 small programming tasks with four code openings (Python, a
comment-first Python, JavaScript, C), and returns the first N of a fixed shuffle, so a corpus is
reproducible from its size and seed. Written for
specgen by its authors; dedicated to the public domain under CC0 1.0, as prompts.txt.

None of these prompts is one of `specgen bench`'s prompts (python/specgen/prompts/), so a head trained on
them is measured on text it has not seen.
"""
from __future__ import annotations

import random
from typing import List

TOPICS = (
    "volcanoes", "the moon", "honey bees", "the Roman Empire", "photosynthesis", "the water cycle", "glaciers",
    "coffee", "the violin", "chess", "the printing press", "electric cars", "rainforests", "the human heart",
    "vaccines", "black holes", "the Silk Road", "sourdough bread", "penguins", "the stock market", "tea",
    "the Great Wall of China", "earthquakes", "solar panels", "the internet", "origami", "the Olympic Games",
    "sleep", "memory", "the ancient Egyptians", "dinosaurs", "coral reefs", "jazz", "the bicycle", "maps",
    "clocks", "the telephone", "wind turbines", "deserts", "the immune system", "bread baking", "gardening",
    "libraries", "trains", "lighthouses", "bridges", "paper", "salt", "the compass", "rain", "snowflakes",
    "owls", "whales", "ants", "mushrooms", "the Renaissance", "democracy", "money", "recycling", "plastic",
    "batteries", "magnets", "gravity", "the speed of light", "rainbows", "thunderstorms", "tides", "the seasons",
    "calendars", "the alphabet", "translation", "museums", "architecture", "castles", "pirates", "the Vikings",
    "the Industrial Revolution", "steam engines", "airplanes", "rockets", "satellites", "telescopes",
    "microscopes", "bacteria", "viruses", "DNA", "evolution", "fossils", "the ocean floor", "rivers",
    "mountains", "forests", "bees and flowers", "chocolate", "cheese", "rice", "olive oil", "spices",
    "the piano", "football", "marathons", "yoga", "meditation", "friendship", "teamwork", "public speaking",
)

TEXT_FORMS = (
    "Explain {t} to a ten-year-old.",
    "Write a short story about {t}.",
    "Q: What is the most surprising fact about {t}?\nA:",
    "Here are five interesting facts about {t}:\n1.",
    "The history of {t} begins",
    "Write a short poem about {t}.",
    "Notes on {t}:\n-",
    "Summarize what scientists know about {t} in one paragraph.",
    "Dear friend,\nI have been reading about {t} lately, and",
    "A beginner's guide to {t}\n\nChapter 1:",
    "Some common misconceptions about {t} are",
    "Write a dialogue between a teacher and a student about {t}.",
)

CODE_TASKS = (
    ("reverse_string", "s", "Return s with its characters in reverse order."),
    ("is_palindrome", "s", "Return True when s reads the same forwards and backwards."),
    ("count_vowels", "s", "Return the number of vowels in s."),
    ("factorial", "n", "Return n! for a non-negative integer n."),
    ("gcd", "a, b", "Return the greatest common divisor of a and b."),
    ("is_prime", "n", "Return True when n is a prime number."),
    ("flatten", "nested", "Flatten a list of lists into one list."),
    ("chunk", "items, size", "Split items into lists of at most size elements."),
    ("word_count", "text", "Return a dict mapping each word of text to its count."),
    ("merge_sorted", "a, b", "Merge two sorted lists into one sorted list."),
    ("binary_search", "items, target", "Return the index of target in the sorted list items, or -1."),
    ("bubble_sort", "items", "Sort items in place with bubble sort and return it."),
    ("quicksort", "items", "Return a sorted copy of items using quicksort."),
    ("transpose", "matrix", "Return the transpose of a matrix given as a list of rows."),
    ("dot", "u, v", "Return the dot product of two equal-length vectors."),
    ("mean", "values", "Return the arithmetic mean of values."),
    ("median", "values", "Return the median of a non-empty list of numbers."),
    ("celsius_to_fahrenheit", "c", "Convert a temperature from Celsius to Fahrenheit."),
    ("roman_to_int", "s", "Convert a Roman numeral string to an integer."),
    ("int_to_binary", "n", "Return the binary representation of a non-negative integer as a string."),
    ("unique", "items", "Return the items without duplicates, keeping the first occurrence order."),
    ("capitalize_words", "text", "Capitalize the first letter of every word in text."),
    ("parse_csv_line", "line", "Split one CSV line on commas, honouring double-quoted fields."),
    ("read_lines", "path", "Return the lines of the text file at path without trailing newlines."),
    ("clamp", "x, lo, hi", "Return x limited to the range [lo, hi]."),
    ("rotate_left", "items, k", "Rotate a list to the left by k positions."),
    ("max_subarray", "values", "Return the largest sum of a contiguous sub-list (Kadane's algorithm)."),
    ("levenshtein", "a, b", "Return the edit distance between strings a and b."),
    ("anagrams", "a, b", "Return True when a and b are anagrams of each other."),
    ("running_total", "values", "Return the list of prefix sums of values."),
    ("matrix_multiply", "a, b", "Multiply two matrices given as lists of rows."),
    ("to_snake_case", "name", "Convert a CamelCase name to snake_case."),
    ("count_lines", "text", "Return the number of non-empty lines in text."),
    ("second_largest", "values", "Return the second largest distinct value in values."),
    ("power_set", "items", "Return all subsets of items as a list of lists."),
    ("pascal_row", "n", "Return row n of Pascal's triangle."),
    ("digits_sum", "n", "Return the sum of the decimal digits of n."),
    ("safe_divide", "a, b", "Return a / b, or None when b is zero."),
    ("find_duplicates", "items", "Return the set of values that occur more than once in items."),
    ("histogram", "values, bins", "Count how many values fall into each of bins equal-width bins."),
)

CODE_FORMS = (
    'def {name}({args}):\n    """{doc}"""\n',
    "# {doc}\ndef {name}({args}):\n",
    "/* {doc} */\nfunction {name}({args}) {{\n",
    "// {doc}\n// Written in C.\n#include <stdio.h>\n\n",
)


def compose_prompts(n: int, seed: int = 0) -> List[str]:
    """The first ``n`` prompts of a fixed shuffle of every topic x form and code task x form pair."""
    prompts = [f.format(t=t) for t in TOPICS for f in TEXT_FORMS]
    prompts += [f.format(name=name, args=args, doc=doc) for name, args, doc in CODE_TASKS for f in CODE_FORMS]
    random.Random(seed).shuffle(prompts)
    return prompts[:n]


def corpus_size() -> int:
    return len(TOPICS) * len(TEXT_FORMS) + len(CODE_TASKS) * len(CODE_FORMS)
