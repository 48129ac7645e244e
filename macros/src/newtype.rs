//! `#[derive(SerializeValue)]` and `#[derive(DeserializeValue)]` on a
//! newtype, a tuple struct of one field (`struct UserId(Uuid)`): the value
//! is its field's, with the field's type checks and encoding, and it
//! borrows from the frame where the field does (`struct Name<'a>(&'a str)`).

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields};

use crate::attrs::{parse_struct_attrs, Field, Input};
use crate::de::Gen;

/// The one field of `ast` when it is a newtype.
pub(crate) fn field(ast: &DeriveInput) -> Option<&syn::Field> {
    match &ast.data {
        Data::Struct(s) => match &s.fields {
            Fields::Unnamed(f) if f.unnamed.len() == 1 => f.unnamed.first(),
            _ => None,
        },
        _ => None,
    }
}

/// The parsed input of newtype `ast` with field `f`, for the generation
/// code the named structs use. The field is named `__inner`, never used as
/// an identifier here (the code reads `self.0`).
fn input<'a>(ast: &'a DeriveInput, f: &syn::Field, derive: &str) -> syn::Result<Input<'a>> {
    let attrs = parse_struct_attrs(ast)?;
    if let Some(span) = attrs.flavor_span.or(attrs.skip_name_checks).or(attrs.forbid_excess_udt_fields) {
        return Err(syn::Error::new(
            span,
            format!(
                "#[derive({derive})] on a newtype writes and reads its one field's value: \
                 `flavor`, `skip_name_checks` and `forbid_excess_udt_fields` do not apply"
            ),
        ));
    }
    if let Some(attr) = f.attrs.iter().find(|a| a.path().is_ident("shardwise")) {
        return Err(syn::Error::new(
            attr.span(),
            format!("#[derive({derive})] on a newtype takes no field attributes: the value is the field's"),
        ));
    }
    let field = Field {
        ident: format_ident!("__inner"),
        ty: f.ty.clone(),
        name: String::from("0"),
        skip: false,
        flatten: None,
        default_when_null: None,
        allow_missing: None,
    };
    Ok(Input { ast, attrs, fields: vec![field] })
}

pub(crate) fn serialize(ast: &DeriveInput, f: &syn::Field) -> syn::Result<TokenStream> {
    let input = input(ast, f, "SerializeValue")?;
    let krate = &input.attrs.krate;
    let ser = quote!(#krate::types::ser);
    let name = &ast.ident;
    let (impl_generics, ty_generics, _) = ast.generics.split_for_impl();
    let where_clause = crate::ser::serializable(ast, &input, &ser, &quote!(#ser::SerializeValue));
    let ty = &f.ty;
    let inner = quote_spanned!(ty.span()=> <#ty as #ser::SerializeValue>);
    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #ser::SerializeValue for #name #ty_generics #where_clause {
            fn check_type(
                &self,
                typ: &#krate::types::ColumnType,
            ) -> ::core::result::Result<(), #krate::EncodeError> {
                #inner::check_type(&self.0, typ)
            }
            fn encoded_len(&self) -> ::core::result::Result<usize, #krate::EncodeError> {
                #inner::encoded_len(&self.0)
            }
            fn encode(&self, buf: &mut impl #krate::bytes::BufMut) {
                #inner::encode(&self.0, buf)
            }
        }
    })
}

pub(crate) fn deserialize(ast: &DeriveInput, f: &syn::Field) -> syn::Result<TokenStream> {
    let input = input(ast, f, "DeserializeValue")?;
    let name = &ast.ident;
    let (cg, impl_generics, where_clause) = Gen::new(&input);
    let (impl_generics, _, _) = impl_generics.split_for_impl();
    let (_, ty_generics, _) = ast.generics.split_for_impl();
    let (krate, de, lt) = (&cg.krate, &cg.de, &cg.lt);
    let inner = input.fields.first().map(|f| cg.value_trait(f));
    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #de::DeserializeValue<#lt> for #name #ty_generics #where_clause {
            fn type_check(
                typ: &#krate::types::ColumnType,
            ) -> ::core::result::Result<(), #de::TypeCheckError> {
                #inner::type_check(typ)
            }
            fn deserialize(
                typ: &#lt #krate::types::ColumnType,
                v: ::core::option::Option<#de::FrameSlice<#lt>>,
            ) -> ::core::result::Result<Self, #de::DeserializeError> {
                ::core::result::Result::Ok(Self(#inner::deserialize(typ, v)?))
            }
        }
    })
}
