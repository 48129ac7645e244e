//! `#[derive(SerializeValue)]`: a struct with named fields written as a
//! value of a user-defined type.
//!
//! A value's encoding never depends on the column type, so the fields are
//! written in declaration order; `check_type` accepts a UDT only when the
//! struct's fields are, in that order, the type's first fields (the type
//! may have more, which the value leaves out: they read as null).

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::DeriveInput;

use crate::attrs::{lit, Input};

pub(crate) fn derive(ast: &DeriveInput) -> syn::Result<TokenStream> {
    let input = Input::parse(ast, "SerializeValue")?;
    if let Some(span) = input.attrs.flavor_span {
        return Err(syn::Error::new(
            span,
            "#[derive(SerializeValue)] writes the fields in declaration order, which must be the \
             type's: `flavor` applies to SerializeValues and DeserializeRow",
        ));
    }
    if let Some(span) = input.attrs.skip_name_checks {
        return Err(syn::Error::new(
            span,
            "#[derive(SerializeValue)] always checks the UDT's field names (its fields go in \
             declaration order, which must be the type's): `skip_name_checks` applies to \
             SerializeValues and DeserializeRow with flavor = \"in_order\"",
        ));
    }
    input.refuse(
        |f| f.flatten,
        "#[derive(SerializeValue)] does not flatten: a UDT value's fields are its own \
         (`flatten` applies to SerializeValues and DeserializeRow)",
    )?;
    input.refuse(
        |f| f.allow_missing,
        "#[derive(SerializeValue)] cannot leave out a field the UDT lacks: a value is written \
         the same whatever the type, so every field is sent and the type must have it; \
         `allow_missing` applies to DeserializeValue (put the field last and add it to the type \
         with ALTER TYPE ADD, or `skip` it)",
    )?;
    // `default_when_null` is for reading: accepted and ignored here, as by
    // the official driver.
    let krate = &input.attrs.krate;
    let ser = quote!(#krate::types::ser);
    let derived = quote!(#krate::types::derived);
    let name = &ast.ident;
    let (impl_generics, ty_generics, _) = ast.generics.split_for_impl();
    let where_clause = crate::ser::serializable(ast, &input, &ser, &quote!(#ser::SerializeValue));

    let fields: Vec<_> = input.active().collect();
    let checks = fields.iter().enumerate().map(|(i, f)| {
        let (ty, ident, field) = (&f.ty, &f.ident, lit(&f.name));
        quote_spanned! {ty.span()=>
            <#ty as #ser::SerializeValue>::check_type(&self.#ident, #derived::udt_field::<Self>(typ, #i, #field)?)
                .map_err(|e| #derived::in_udt_field::<Self>(typ, #field, e))?;
        }
    });
    let lens = fields.iter().map(|f| {
        let (ty, ident) = (&f.ty, &f.ident);
        quote_spanned!(ty.span()=> .saturating_add(<#ty as #ser::SerializeValue>::encoded_len(&self.#ident)?))
    });
    let encodes = fields.iter().map(|f| {
        let (ty, ident) = (&f.ty, &f.ident);
        quote_spanned!(ty.span()=> <#ty as #ser::SerializeValue>::encode(&self.#ident, buf);)
    });

    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #ser::SerializeValue for #name #ty_generics #where_clause {
            fn check_type(
                &self,
                typ: &#krate::types::ColumnType,
            ) -> ::core::result::Result<(), #krate::EncodeError> {
                #derived::check_udt::<Self>(typ)?;
                #(#checks)*
                ::core::result::Result::Ok(())
            }
            fn encoded_len(&self) -> ::core::result::Result<usize, #krate::EncodeError> {
                #derived::udt_len(0usize #(#lens)*)
            }
            fn encode(&self, buf: &mut impl #krate::bytes::BufMut) {
                // Only called after `encoded_len` succeeded.
                let body = <Self as #ser::SerializeValue>::encoded_len(self).unwrap_or(4).saturating_sub(4);
                #krate::bytes::BufMut::put_i32(buf, body as i32);
                #(#encodes)*
            }
        }
    })
}
