// Fixed texts for the perplexity / KL tests (our own prose, plain ASCII English).
#pragma once

namespace wick::test {

// 1,569 bytes: 12 windows of 128 byte-level tokens and a 33-token tail.
inline constexpr const char* kEnglishText =
    "The old lighthouse stood at the end of a narrow spit of land, where the sea met the river "
    "and the fog came in every evening before the fishing boats returned. For many years a "
    "keeper had lived there with his daughter, trimming the wick, polishing the great lens and "
    "writing the weather into a thick book that nobody else ever read. In the spring the gulls "
    "nested on the rocks below the tower, and in the autumn the storms came from the west and "
    "shook the windows until the glass sang. The daughter learned to read the sky before she "
    "learned to read the book. She knew that a red sunset meant a calm night, that a ring around "
    "the moon meant rain within a day, and that when the swallows flew low over the water the "
    "wind would turn before morning. When she was twelve her father fell ill, and for a whole "
    "winter she kept the light burning alone. Every night she climbed the hundred and twelve "
    "steps with a can of oil, and every morning she came down again to sleep for a few hours "
    "before school. The people of the town did not know, because the light never failed. In "
    "March a ship lost its way in a storm and found the harbour only because the beam swept "
    "across the water at the same steady pace as always. The captain came to the tower the next "
    "day to thank the keeper, and found a girl asleep at the kitchen table with her head on the "
    "weather book. He told the story in every port he visited, and by the summer the whole coast "
    "knew the name of the lighthouse and the girl who had kept it. Her father recovered, and the "
    "book is still there, on a shelf beside the stairs.";

// A different text (776 bytes): a recipe, numbers and lists.
inline constexpr const char* kOtherText =
    "Bread, basic loaf. 500 g strong white flour, 7 g dried yeast, 10 g salt, 320 ml warm water, "
    "2 tbsp olive oil. 1) Mix the flour, yeast and salt in a large bowl. 2) Add the water and "
    "the oil; stir until a rough dough forms. 3) Knead on a floured surface for 10 minutes, "
    "until smooth and elastic. 4) Leave in an oiled bowl, covered, for 1 to 2 hours, until "
    "doubled in size. 5) Knock back, shape into a loaf, place in a 900 g tin. 6) Prove for 45 "
    "minutes. 7) Bake at 220 C for 30 to 35 minutes; the loaf should sound hollow when tapped "
    "underneath. Cool on a wire rack for at least 1 hour before slicing. Variations: replace "
    "100 g of the flour with wholemeal; add 50 g of seeds (sunflower, pumpkin, linseed); brush "
    "the top with milk for a soft crust, or with water for a crisp one.";

}  // namespace wick::test
