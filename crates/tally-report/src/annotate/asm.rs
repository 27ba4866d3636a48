pub(super) fn write_text<C: tally_model::Cost>(
    _: &super::Analysis<'_, C>,
    _: &mut dyn std::io::Write,
    _: crate::format::Style,
    _: &mut Vec<String>,
) -> std::io::Result<()> {
    Ok(())
}
