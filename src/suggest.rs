//! "Did you mean ...?" for every place that rejects a name the user typed (experiment keys,
//! fio options, metric names): the closest candidate by edit distance, when it is close enough
//! to be a typo rather than a different word.

/// The candidate nearest to `word`, if within a typo's distance (2, or a quarter of the word
/// for long words) and not a complete rewrite of the candidate.
pub(crate) fn closest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|&(d, c)| d <= 2.max(word.len() / 4) && d < c.len())
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_typos_not_other_words() {
        assert_eq!(closest("iodeph", ["iodepth", "bs"]), Some("iodepth"));
        assert_eq!(
            closest("rq_afinity", ["rq_affinity", "nomerges"]),
            Some("rq_affinity")
        );
        assert_eq!(closest("zzzzzzzz", ["iodepth", "bs"]), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
