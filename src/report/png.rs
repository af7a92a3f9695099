//! PNG copies of our SVG charts, rasterised inside the binary.
//!
//! People paste charts into mail, chat and issue trackers that do not show SVG, so `iolab plot
//! -o x.png` and `iolab trace plot --png` need a bitmap without asking the user to install
//! librsvg. The SVG stays the one drawing; this only rasterises it (pure-Rust `resvg`). Text is
//! set in DejaVu Sans compiled into the binary, and every generic family maps to it, so the
//! same chart gives the same pixels on any machine, with or without fonts installed.

use std::sync::{Arc, OnceLock};

use anyhow::{anyhow, Context};
use resvg::tiny_skia::{Color, Pixmap, Transform};
use resvg::usvg::{fontdb, Options, Tree};

/// Pixels per SVG unit: our charts are laid out for about 900 px wide, and 2x keeps 11–13 px
/// labels readable on high-density screens and after a chat client scales the image down.
pub(crate) const SCALE: f32 = 2.0;

/// The only font used for PNG text (licence: assets/fonts/LICENSE).
const FONT_FAMILY: &str = "DejaVu Sans";
static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// Rasterises an SVG document at [`SCALE`] over a white background and encodes it as PNG.
pub(crate) fn svg_to_png(svg: &str) -> anyhow::Result<Vec<u8>> {
    let options = Options {
        font_family: FONT_FAMILY.to_string(),
        fontdb: font_database(),
        ..Options::default()
    };
    let tree = Tree::from_str(svg, &options).context("parsing the SVG to rasterise")?;
    let size = tree.size();
    let width = (size.width() * SCALE).ceil() as u32;
    let height = (size.height() * SCALE).ceil() as u32;
    let mut pixmap = Pixmap::new(width, height)
        .ok_or_else(|| anyhow!("cannot rasterise a {width}x{height} pixel image"))?;
    // Charts normally paint their own white background; this keeps any uncovered pixel from
    // showing as black in viewers that ignore alpha.
    pixmap.fill(Color::WHITE);
    resvg::render(
        &tree,
        Transform::from_scale(SCALE, SCALE),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().context("encoding the PNG")
}

/// The embedded font, loaded once; every generic family (and any unknown family, through
/// `Options::font_family`) resolves to it.
fn font_database() -> Arc<fontdb::Database> {
    static DB: OnceLock<Arc<fontdb::Database>> = OnceLock::new();
    DB.get_or_init(|| {
        let mut db = fontdb::Database::new();
        db.load_font_source(fontdb::Source::Binary(Arc::new(FONT)));
        db.set_sans_serif_family(FONT_FAMILY);
        db.set_serif_family(FONT_FAMILY);
        db.set_monospace_family(FONT_FAMILY);
        db.set_cursive_family(FONT_FAMILY);
        db.set_fantasy_family(FONT_FAMILY);
        Arc::new(db)
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Width and height from the IHDR chunk, which the PNG format puts first.
    fn ihdr_size(png: &[u8]) -> (u32, u32) {
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
        assert_eq!(&png[12..16], b"IHDR");
        let be = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
        (be(16), be(20))
    }

    /// Decodes to 8-bit RGBA rows so tests can look at pixels.
    fn decode(png_bytes: &[u8]) -> (u32, u32, Vec<u8>) {
        let mut reader = png::Decoder::new(std::io::Cursor::new(png_bytes))
            .read_info()
            .unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!(info.color_type, png::ColorType::Rgba);
        assert_eq!(info.bit_depth, png::BitDepth::Eight);
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    fn dark_pixels(rgba: &[u8]) -> usize {
        rgba.chunks_exact(4)
            .filter(|p| (p[0] as u32 + p[1] as u32 + p[2] as u32) < 3 * 128)
            .count()
    }

    #[test]
    fn size_is_the_svg_size_times_the_scale() {
        let svg = r#"<svg xmlns="http://www.w3.org/2000/svg" width="300" height="120"><rect width="10" height="10" fill="black"/></svg>"#;
        let png = svg_to_png(svg).unwrap();
        assert_eq!(ihdr_size(&png), (600, 240));
        let (w, h, rgba) = decode(&png);
        assert_eq!((w, h), (600, 240));
        // The 10x10 square at 2x is 400 dark pixels; the rest is the white background.
        assert_eq!(dark_pixels(&rgba), 400);
        assert_eq!(&rgba[rgba.len() - 4..], &[255, 255, 255, 255]);
    }

    #[test]
    fn text_is_drawn_with_the_embedded_font_for_any_family() {
        let blank = r#"<svg xmlns="http://www.w3.org/2000/svg" width="200" height="40"></svg>"#;
        assert_eq!(dark_pixels(&decode(&svg_to_png(blank).unwrap()).2), 0);
        for family in [
            "sans-serif",
            "serif",
            "monospace",
            "No Such Font",
            "DejaVu Sans",
        ] {
            let svg = format!(
                r#"<svg xmlns="http://www.w3.org/2000/svg" width="200" height="40"><text x="5" y="30" font-family="{family}" font-size="20">IOPS 4k</text></svg>"#
            );
            let (_, _, rgba) = decode(&svg_to_png(&svg).unwrap());
            assert!(
                dark_pixels(&rgba) > 200,
                "{family}: text left the image blank"
            );
        }
    }

    #[test]
    fn bad_svg_is_an_error_not_a_panic() {
        assert!(svg_to_png("not svg").is_err());
        assert!(svg_to_png(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="0" height="0"></svg>"#
        )
        .is_err());
    }
}
